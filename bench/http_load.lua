-- wrk script for bench/http_load.py.
--
-- Arguments (after wrk's `--`): METHOD THREADS [TOKENS_FILE]
--   METHOD       the request method (GET, POST)
--   THREADS      wrk's -t, so each thread takes its own share of the tokens
--   TOKENS_FILE  optional: one bearer token a line; every request sends the next one, and
--                thread i takes lines i, i+THREADS, ... so no token is sent twice until
--                the file runs out (then it starts over: http_load.py mints enough)
-- Every answer's status is counted per thread; done() prints one line,
-- `HTTPLOAD {json}`, with the request count, duration, p50/p99 latency (microseconds),
-- socket errors and the status counts.

local threads = {}
local created = 0

function setup(thread)
   thread:set("id", created)
   created = created + 1
   table.insert(threads, thread)
end

function init(args)
   method = args[1]
   local share = tonumber(args[2])
   statuses = {}
   tokens = nil
   if args[3] then
      tokens = {}
      local line_number = 0
      for line in io.lines(args[3]) do
         if line_number % share == id then
            tokens[#tokens + 1] = line
         end
         line_number = line_number + 1
      end
      position = 0
   else
      fixed = wrk.format(method)
   end
end

function request()
   if tokens == nil then
      return fixed
   end
   position = position % #tokens + 1
   wrk.headers["Authorization"] = "Bearer " .. tokens[position]
   return wrk.format(method)
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
   local counts = {}
   for _, thread in ipairs(threads) do
      for status, count in pairs(thread:get("statuses")) do
         counts[status] = (counts[status] or 0) + count
      end
   end
   local parts = {}
   for status, count in pairs(counts) do
      parts[#parts + 1] = string.format('"%d":%d', status, count)
   end
   local errors = summary.errors
   io.write(string.format(
      'HTTPLOAD {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,'
         .. '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"statuses":{%s}}\n',
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
      errors.connect, errors.read, errors.write, errors.timeout, table.concat(parts, ",")))
end
