-- get: GET the first page of the seeded account. No request() function, so wrk sends one static request (cheapest
-- for the load generator, leaving the server as the bottleneck).
dofile(debug.getinfo(1, 'S').source:match('^@(.*/)') .. 'common.lua')

wrk.method = 'GET'
wrk.path = bench.list_path
wrk.headers['Authorization'] = 'Bearer ' .. bench.token
