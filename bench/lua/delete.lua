-- delete: DELETE plants that exist (ids the harness knows were created and not yet deleted), each once.
dofile(debug.getinfo(1, 'S').source:match('^@(.*/)') .. 'common.lua')

function request()
  return wrk.format('DELETE', string.format('/plants/%d', bench.existing_id()), bench.read_headers)
end
