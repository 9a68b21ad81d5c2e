#!/bin/sh
# Waits for the server, then makes sure the namespace and lw's search attributes exist
# (LwRole, LwDefinition: the worker runs with --search-attributes); safe to rerun.
set -eu
NAMESPACE="${DEFAULT_NAMESPACE:-default}"
ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
tries=0
until temporal operator cluster health --address "$ADDRESS" >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -ge 60 ] && { echo "server at $ADDRESS did not become healthy"; exit 1; }
  sleep 2
done
temporal operator namespace describe -n "$NAMESPACE" --address "$ADDRESS" >/dev/null 2>&1 \
  || temporal operator namespace create -n "$NAMESPACE" --address "$ADDRESS"
for name in LwRole LwDefinition; do
  temporal operator search-attribute list -n "$NAMESPACE" --address "$ADDRESS" | grep -qw "$name" \
    || temporal operator search-attribute create -n "$NAMESPACE" --address "$ADDRESS" \
         --name "$name" --type Keyword
done
echo "namespace $NAMESPACE ready"
