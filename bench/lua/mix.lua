-- mix: every Nth request POSTs a fresh plant, the others GET the first page (N = 10 gives 90% reads). A fixed
-- pattern rather than random draws, so every round and every server sees the same sequence.
dofile(debug.getinfo(1, 'S').source:match('^@(.*/)') .. 'common.lua')

local count = 0

function request()
  count = count + 1
  if count % bench.write_every == 0 then
    return wrk.format('POST', '/plants', bench.write_headers, bench.plant_body(bench.fresh_id()))
  end
  return wrk.format('GET', bench.list_path, bench.read_headers)
end
