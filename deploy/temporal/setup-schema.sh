#!/bin/sh
# Creates (or upgrades) the Temporal and visibility schemas in PostgreSQL, as Temporal's
# own compose files do with temporal-sql-tool from the admin-tools image; safe to rerun.
set -eu
: "${POSTGRES_SEEDS:?set POSTGRES_SEEDS to the database host}"
: "${POSTGRES_USER:?set POSTGRES_USER}"
PORT="${DB_PORT:-5432}"
SCHEMA=/etc/temporal/schema/postgresql/v12
until nc -z -w 5 "$POSTGRES_SEEDS" "$PORT"; do echo "waiting for $POSTGRES_SEEDS:$PORT"; sleep 2; done
for db in temporal temporal_visibility; do
  dir=temporal
  [ "$db" = temporal_visibility ] && dir=visibility
  tool="temporal-sql-tool --plugin postgres12 --ep $POSTGRES_SEEDS -u $POSTGRES_USER -p $PORT --db $db"
  $tool create || true  # already there on a rerun
  $tool setup-schema -v 0.0 || true  # the version table exists on a rerun
  $tool update-schema -d "$SCHEMA/$dir/versioned"
done
echo "schemas ready"
