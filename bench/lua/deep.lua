-- deep: GET keyset pages at positions spread across the account, through cursors the harness built with the
-- service's own encoding (and checked against its Link headers). Each request picks one at random; the generator
-- is seeded, so every run (every round, account and server) draws the same sequence of positions.
dofile(debug.getinfo(1, 'S').source:match('^@(.*/)') .. 'common.lua')

local requests = {}

function init(args)
  math.randomseed(1000 + thread_index)
  for cursor in bench.cursors:gmatch('[^,]+') do
    requests[#requests + 1] = wrk.format('GET', bench.list_path .. '&cursor=' .. cursor, bench.read_headers)
  end
  if #requests == 0 then error('PLANTSTORE_BENCH_CURSORS is not set') end
end

function request()
  return requests[math.random(#requests)]
end
