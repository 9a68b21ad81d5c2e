"""Example workflow definitions (the seeds' ``defineWorkflow`` calls) with the scripts
that let a ``ScriptedModel`` play their agents, for the demo, the tests and as a
template for your own."""
