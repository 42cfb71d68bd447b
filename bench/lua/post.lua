-- post: POST plants with fresh ids (a counter per thread inside a block the harness never hands out twice).
dofile(debug.getinfo(1, 'S').source:match('^@(.*/)') .. 'common.lua')

function request()
  return wrk.format('POST', '/plants', bench.write_headers, bench.plant_body(bench.fresh_id()))
end
