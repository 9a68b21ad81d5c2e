"""The agent hierarchy's workflows: the agent loop and one module per role."""
