-- wrk script for the benchmark: every request asks for the next path of a list file (one URL
-- path per line), so wrk fetches the same pages harvestd does. Each thread starts at its own
-- offset in the list. Usage:
--   wrk -t2 -c64 -d10s -s rotate.lua http://127.0.0.1:PORT -- PATHS_FILE
-- At the end one line "wrk-json {...}" gives the raw counts for the benchmark to read.

local counter = 0
local threads = {}

function setup(thread)
   thread:set("id", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

function init(args)
   paths = {}
   for line in io.lines(args[1]) do
      if line ~= "" then
         paths[#paths + 1] = line
      end
   end
   if #paths == 0 then
      error("no paths in " .. args[1])
   end
   -- Spread the threads over the list (ids are 0, 1, ...; 7919 is prime).
   idx = (id * 7919) % #paths + 1
end

function request()
   local path = paths[idx]
   idx = idx + 1
   if idx > #paths then
      idx = 1
   end
   return wrk.format("GET", path)
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'wrk-json {"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,' ..
      '"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
      '"latency_mean_us":%.1f,"latency_p50_us":%d,"latency_p99_us":%d,"latency_max_us":%d}\n',
      summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
      e.timeout, latency.mean, latency:percentile(50), latency:percentile(99), latency.max))
end
