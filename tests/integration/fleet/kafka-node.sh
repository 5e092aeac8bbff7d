#!/bin/sh
# A platform team's own tooling, as the command deployer's tests drive it: each Kafka node a container run with the
# Docker CLI. What makes a node itself (ids, listeners, storage, JVM options) is kept in $NODES/<name>.env and its
# labels in $NODES/<name>.labels; a roll re-creates the container from those, the image of the version asked for
# ($KAFKA_NODE_IMAGE with {version}) and the properties file it is given, and returns once the node has started.
#
#   kafka-node.sh roll NAME VERSION CONFIG_FILE
#   kafka-node.sh describe NAME          prints "VERSION STATE"
#   kafka-node.sh stop NAME | start NAME
set -eu
action=$1 name=$2
case "$action" in
describe)
  docker inspect -f '{{index .Config.Labels "io.kafka-canary.version"}} {{.State.Status}}' "$name"
  ;;
stop)
  docker stop -t "${STOP_TIMEOUT:-60}" "$name" >/dev/null
  ;;
start)
  docker start "$name" >/dev/null
  ;;
roll)
  version=$3 config=$4
  image=$(printf '%s' "$KAFKA_NODE_IMAGE" | sed "s/{version}/$version/")
  # key=value -> the image's KAFKA_* variable (. is _, _ is __, - is ___)
  awk 'index($0, "=") > 1 && $0 !~ /^#/ {
         k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
         gsub(/_/, "__", k); gsub(/-/, "___", k); gsub(/\./, "_", k); print "KAFKA_" toupper(k) "=" v }' \
    "$config" > "$NODES/$name.config.env.new"
  # SKIP_UNCHANGED=1: leave a running node alone when neither its version nor its config changes, as a handler that
  # fires only on a changed file would.
  if [ -n "${SKIP_UNCHANGED:-}" ] && cmp -s "$NODES/$name.config.env.new" "$NODES/$name.config.env" 2>/dev/null \
     && [ "$(docker inspect -f '{{index .Config.Labels "io.kafka-canary.version"}} {{.State.Status}}' "$name")" \
          = "$version running" ]; then
    rm -f "$NODES/$name.config.env.new"
    echo "$name unchanged, not restarted"
    exit 0
  fi
  mv "$NODES/$name.config.env.new" "$NODES/$name.config.env"
  docker stop -t "${STOP_TIMEOUT:-60}" "$name" >/dev/null 2>&1 || true
  docker rm "$name" >/dev/null 2>&1 || true
  docker run -d --name "$name" --network host --env-file "$NODES/$name.env" --env-file "$NODES/$name.config.env" \
    --label-file "$NODES/$name.labels" --label "io.kafka-canary.version=$version" \
    --mount "type=volume,src=$name-data,dst=/var/lib/kafka/data" "$image" >/dev/null
  # RETURN_AT_START=1: return once the container runs, as a roll script that checks nothing after start would.
  [ -z "${RETURN_AT_START:-}" ] || { echo "$name started on $image (not waited for)"; exit 0; }
  waited=0
  while [ "$waited" -lt "${START_TIMEOUT:-120}" ]; do
    if [ "$(docker inspect -f '{{.State.Status}}' "$name")" = exited ]; then
      echo "$name exited at start:" >&2
      docker logs --tail 15 "$name" >&2 2>&1
      exit 1
    fi
    if docker logs "$name" 2>&1 | grep -q "Kafka Server started"; then
      echo "$name started on $image"
      exit 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  echo "$name did not start within ${START_TIMEOUT:-120}s" >&2
  exit 1
  ;;
*)
  echo "usage: $0 roll NAME VERSION CONFIG_FILE | describe NAME | stop NAME | start NAME" >&2
  exit 2
  ;;
esac
