#!/usr/bin/env bash
# The production install of docs/operations.md ("Production install"), from a fresh clone of this checkout's HEAD,
# as CI runs it (.ci/run): `npm ci --omit=dev` stops with one line pointing to the documented sequence; the sequence
# leaves the built service and its runtime dependencies alone, which then serve. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
omitted=
finish() {
  [ -z "$omitted" ] || kill "$omitted" 2>/dev/null || true
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap finish EXIT
fail() {
  echo "check-production-install: $*" >&2
  exit 1
}

git clone -q "$root" "$work/plantstore"
git clone -q "$root" "$work/omitted"

# Both installs at once, in clones of their own: each spends most of its time compiling SQLite on one core.
echo "check-production-install: npm ci --omit=dev (stops with one line), beside npm ci --include=dev && npm run build && npm prune --omit=dev"
(cd "$work/omitted" && npm ci --omit=dev >"$work/omit.log" 2>&1) &
omitted=$!
cd "$work/plantstore"
npm ci --include=dev >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "npm ci failed"; }
npm run build >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "npm run build failed"; }
npm prune --omit=dev >"$work/prune.log" 2>&1 || { cat "$work/prune.log"; fail "npm prune --omit=dev failed"; }
if wait "$omitted"; then omitted= && fail "npm ci --omit=dev succeeded without building"; fi
omitted=
grep -q '^plantstore: building needs the development dependencies (typescript is not installed); install for production with `npm ci --include=dev && npm run build && npm prune --omit=dev`' "$work/omit.log" ||
  { cat "$work/omit.log"; fail "npm ci --omit=dev did not say how to install for production"; }
if grep -Eq '^\s+at ' "$work/omit.log"; then cat "$work/omit.log"; fail "npm ci --omit=dev printed a stack trace"; fi
grep '^plantstore: ' "$work/omit.log"
for dev in typescript tsx eslint prettier playwright-core; do
  [ ! -e "node_modules/$dev" ] || fail "node_modules/$dev is still there after npm prune --omit=dev"
done

echo "check-production-install: it serves (npm start; bin/plantstore.js for the token)"
# The service's own settings from the caller's environment (CI's, a developer's) stay out of it.
for name in $(env | sed -n 's/^\(PLANTSTORE_[A-Z_]*\|HOST\|LOG_LEVEL\|DATABASE_[A-Z_]*\|REDIS_URL\|WORKERS\)=.*/\1/p'); do
  unset "$name"
done
database="sqlite:$work/data/plantstore.db"
token=$(node bin/plantstore.js tokens create --account default --database "$database" 2>"$work/token.log" | head -1) ||
  { cat "$work/token.log"; fail "plantstore tokens create failed"; }
[ -n "$token" ] || { cat "$work/token.log"; fail "plantstore tokens create printed no token"; }
PORT=0 DATABASE_URL="$database" npm start >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  url=$(grep -o 'Server listening at http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 | sed 's/^Server listening at //') || true
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; fail "npm start exited"; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; fail "npm start did not listen"; }
URL=$url TOKEN=$token node --input-type=module -e '
  const headers = { authorization: `Bearer ${process.env.TOKEN}`, "content-type": "application/json" }
  const created = await fetch(`${process.env.URL}/plants`, { method: "POST", headers, body: JSON.stringify({ id: 1, name: "Fern" }) })
  const listed = await (await fetch(`${process.env.URL}/plants`, { headers })).text()
  if (created.status !== 200 || listed !== "[{\"name\":\"Fern\"}]") throw new Error(`${created.status} ${listed}`)
' || fail "the pruned install did not create and list a plant"
echo "check-production-install: ok"
