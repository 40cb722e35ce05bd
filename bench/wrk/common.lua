-- What every wrk script of the bench shares (loaded with dofile from the script's own directory):
-- each thread's first sequence number (thread index; each then steps by WRK_THREADS, so that
-- threads never repeat one another's), and one machine-readable summary line at the end:
-- WRK_JSON {...}. (wrk counts a status >= 400 in errors.status; no response() hook, which would
-- make wrk parse every response in Lua.)
step = tonumber(os.getenv("WRK_THREADS") or "2")
local counter = 0

function setup(thread)
  thread:set("first", counter)
  counter = counter + 1
end

function init(args)
  n = first
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"durationS":%.3f,"requests":%d,"non2xx":%d,"errors":%d,"p50":%.1f,"p99":%.1f,"max":%.1f}\n',
    summary.duration / 1e6, summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
