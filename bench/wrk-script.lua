-- The wrk script of every scenario, set through the environment (which every wrk Lua state can read):
--
--   PLANTSTORE_BENCH_REQUESTS    get: the list request, static (no request(): cheapest for the load generator);
--                                post: fresh plants; mix: every 10th request a POST, the others GETs; delete:
--                                existing plants, each once; deep: keyset pages at random (seeded: the same order
--                                on every run)
--   PLANTSTORE_BENCH_TOKEN       bearer token (kept out of wrk's command line, so `ps` does not show it)
--   PLANTSTORE_BENCH_CURSORS     the deep pages' cursors, comma-separated
--   PLANTSTORE_BENCH_CATALOGUE   the plants POSTed: "name|tag;name|;..." (bench/plants.ts)
--   PLANTSTORE_BENCH_ID_START    first id of this run's block: fresh (post, mix) or existing (delete)
--   PLANTSTORE_BENCH_ID_END      end of the existing ids (delete); id 0 (a 404, an error) once they run out
--   PLANTSTORE_BENCH_ORIGIN      an Origin header on every request (CORS), when set
--   PLANTSTORE_BENCH_KEYED       1: every POST with an Idempotency-Key of its own

local function env(name) return os.getenv(name) or '' end

local kind = env('PLANTSTORE_BENCH_REQUESTS')
local list_path = '/plants?limit=20' -- LIST_PATH in bench/scenarios.ts
-- Separate tables: wrk.format writes Host and Content-Length into the table it is given.
local read_headers = { ['Authorization'] = 'Bearer ' .. env('PLANTSTORE_BENCH_TOKEN') }
local write_headers = { ['Authorization'] = read_headers['Authorization'], ['Content-Type'] = 'application/json' }
local origin = os.getenv('PLANTSTORE_BENCH_ORIGIN') -- nil when unset: no Origin header at all
read_headers['Origin'], write_headers['Origin'] = origin, origin
local keyed = env('PLANTSTORE_BENCH_KEYED') == '1'

-- One thread (wrk -t1), so one counter walks the block.
local next_id = tonumber(env('PLANTSTORE_BENCH_ID_START')) or 0
local id_end = tonumber(env('PLANTSTORE_BENCH_ID_END')) or 0

local catalogue = {}
for name, tag in env('PLANTSTORE_BENCH_CATALOGUE'):gmatch('([^;|]*)|([^;]*)') do
  catalogue[#catalogue + 1] = { name = name, tag = tag }
end

-- The next fresh plant as bench/plants.ts seedPlant(id) gives it (names hold nothing JSON would escape).
local function post()
  local id, entry = next_id, catalogue[next_id % #catalogue + 1]
  next_id = next_id + 1
  local tag = entry.tag == '' and '' or string.format(',"tag":"%s"', entry.tag)
  if keyed then write_headers['Idempotency-Key'] = string.format('bench-%d', id) end
  return wrk.format('POST', '/plants', write_headers, string.format('{"id":%d,"name":"%s"%s}', id, entry.name, tag))
end

if kind == 'get' then
  wrk.method, wrk.path, wrk.headers['Authorization'] = 'GET', list_path, read_headers['Authorization']
  wrk.headers['Origin'] = read_headers['Origin']
elseif kind == 'post' then
  request = post
elseif kind == 'mix' then
  local count = 0
  request = function()
    count = count + 1
    if count % 10 == 0 then return post() end
    return wrk.format('GET', list_path, read_headers)
  end
elseif kind == 'delete' then
  request = function()
    local id = next_id < id_end and next_id or 0
    next_id = next_id + 1
    return wrk.format('DELETE', string.format('/plants/%d', id), read_headers)
  end
elseif kind == 'deep' then
  local pages = {}
  init = function()
    math.randomseed(1000)
    for cursor in env('PLANTSTORE_BENCH_CURSORS'):gmatch('[^,]+') do
      pages[#pages + 1] = wrk.format('GET', list_path .. '&cursor=' .. cursor, read_headers)
    end
  end
  request = function() return pages[math.random(#pages)] end
else
  error('PLANTSTORE_BENCH_REQUESTS: ' .. kind)
end

-- One JSON line the harness parses: wrk's human summary is for people, this is for the report.
function done(summary, latency)
  local e = summary.errors
  io.write(string.format(
    'PLANTSTORE_BENCH_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"socket":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
