-- wrk script: GET one customer, GET_ONE_PREFIX .. ((n * 7919) % GET_ONE_CUSTOMERS) as
-- bench/scenarios/get-one.ts builds the paths, with n = thread index + k * WRK_THREADS (threads
-- never repeat one another's sequence). Prints one machine-readable line at the end: WRK_JSON {...}.
local prefix = os.getenv("GET_ONE_PREFIX") or "q-"
local customers = tonumber(os.getenv("GET_ONE_CUSTOMERS") or "1000")
local step = tonumber(os.getenv("WRK_THREADS") or "2")
local counter = 0

function setup(thread)
  thread:set("first", counter)
  counter = counter + 1
end

local n

function init(args)
  n = first
end

function request()
  local path = string.format("/v1/underwritings/%s%d", prefix, (n * 7919) % customers)
  n = n + step
  return wrk.format("GET", path)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"durationS":%.3f,"requests":%d,"non2xx":%d,"errors":%d,"p50":%.1f,"p99":%.1f,"max":%.1f}\n',
    summary.duration / 1e6, summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
