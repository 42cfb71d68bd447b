-- Shared by the scenario scripts (loaded with dofile). Settings come from the environment, which every wrk Lua
-- state can read (init's args reach only the thread states, not the main state that runs setup and done).
--
--   PLANTSTORE_BENCH_TOKEN          bearer token (kept out of wrk's command line, so `ps` does not show it)
--   PLANTSTORE_BENCH_LIST_PATH      path of the list request (get, mix, deep)
--   PLANTSTORE_BENCH_CURSORS        cursors of the pages to request, comma-separated (deep)
--   PLANTSTORE_BENCH_CATALOGUE      the plants POSTed: "name|tag;name|;..."; plant id is entry id % count + 1
--                                   (bench/plants.ts, which the seeders follow too)
--   PLANTSTORE_BENCH_ID_START       first fresh id of this run's block (post, mix)
--   PLANTSTORE_BENCH_ID_STRIDE      ids per thread inside the block, so threads never collide (post, mix)
--   PLANTSTORE_BENCH_WRITE_EVERY    every Nth request is a POST (mix)
--   PLANTSTORE_BENCH_DELETE_RANGES  existing ids per thread: "a:b,c:d;e:f" (half-open ranges; ';' between threads)

local function env(name, default)
  local value = os.getenv(name)
  if value == nil or value == '' then
    if default == nil then error(name .. ' is not set') end
    return default
  end
  return value
end

bench = {}
bench.token = env('PLANTSTORE_BENCH_TOKEN')
bench.list_path = env('PLANTSTORE_BENCH_LIST_PATH', '/plants?limit=20')
bench.write_every = tonumber(env('PLANTSTORE_BENCH_WRITE_EVERY', '10'))
bench.cursors = env('PLANTSTORE_BENCH_CURSORS', '')
-- Separate tables: wrk.format writes Host and Content-Length into the table it is given.
bench.read_headers = { ['Authorization'] = 'Bearer ' .. bench.token }
bench.write_headers = { ['Authorization'] = 'Bearer ' .. bench.token, ['Content-Type'] = 'application/json' }

local id_start = tonumber(env('PLANTSTORE_BENCH_ID_START', '0'))
local id_stride = tonumber(env('PLANTSTORE_BENCH_ID_STRIDE', '0'))
local ranges_by_thread = {}
for part in (env('PLANTSTORE_BENCH_DELETE_RANGES', '') .. ';'):gmatch('([^;]*);') do
  ranges_by_thread[#ranges_by_thread + 1] = part
end

local threads = {}

-- Runs in the main state once per thread, before the thread's init: hands each thread its index and its own ids,
-- as globals of the thread's Lua state (thread_index, first_id, next_id, my_ranges, taken).
function setup(thread)
  local index = #threads
  threads[index + 1] = thread
  thread:set('thread_index', index)
  thread:set('first_id', id_start + index * id_stride)
  thread:set('next_id', id_start + index * id_stride)
  thread:set('my_ranges', ranges_by_thread[index + 1] or '')
  thread:set('taken', 0)
end

-- The next fresh id of this thread (post, mix). wrk calls request() once before the run to check it, so the
-- first id is never sent: the harness knows and does not count it as created.
function bench.fresh_id()
  local id = next_id
  next_id = next_id + 1
  return id
end

local catalogue = {}
for entry in (env('PLANTSTORE_BENCH_CATALOGUE', '') .. ';'):gmatch('([^;]*);') do
  local name, tag = entry:match('^(.*)|(.*)$')
  if name ~= nil then catalogue[#catalogue + 1] = { name = name, tag = tag } end
end

-- The plant bench/plants.ts seedPlant(id) gives (names hold nothing JSON would escape).
function bench.plant_body(id)
  if #catalogue == 0 then error('PLANTSTORE_BENCH_CATALOGUE is not set') end
  local entry = catalogue[id % #catalogue + 1]
  if entry.tag == '' then return string.format('{"id":%d,"name":"%s"}', id, entry.name) end
  return string.format('{"id":%d,"name":"%s","tag":"%s"}', id, entry.name, entry.tag)
end

-- Existing ids to delete, walked range by range. Once they run out, id 0 (never created) gives 404s, which the
-- harness reports as errors: a pool too small must show, not silently measure something else.
local ranges, range_index, cursor
function bench.existing_id()
  if ranges == nil then
    ranges, range_index = {}, 1
    for a, b in my_ranges:gmatch('(%d+):(%d+)') do ranges[#ranges + 1] = { tonumber(a), tonumber(b) } end
    cursor = ranges[1] and ranges[1][1]
  end
  while ranges[range_index] ~= nil and cursor >= ranges[range_index][2] do
    range_index = range_index + 1
    cursor = ranges[range_index] and ranges[range_index][1]
  end
  taken = taken + 1
  if ranges[range_index] == nil then return 0 end
  local id = cursor
  cursor = cursor + 1
  return id
end

-- One JSON line the harness parses: wrk's human summary is for people, this is for the report.
function done(summary, latency, requests)
  local e = summary.errors
  local parts = {}
  for _, thread in ipairs(threads) do
    parts[#parts + 1] = string.format('{"first":%d,"next":%d,"taken":%d}', thread:get('first_id'),
      thread:get('next_id'), thread:get('taken'))
  end
  io.write(string.format(
    'PLANTSTORE_BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"non2xx":%d,"connect":%d,"read":%d,' ..
      '"write":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"threads":[%s]}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, table.concat(parts, ',')))
end
