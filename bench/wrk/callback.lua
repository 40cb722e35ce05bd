-- wrk script: every request a distinct provider result, for customer CALLBACK_PREFIX .. n with
-- n = thread index + k * WRK_THREADS (threads never repeat one another's customers); the
-- requests are seeded as 'submitted' beforehand. Prints one machine-readable line at the end:
-- WRK_JSON {...}. (wrk counts a status >= 400 in errors.status; no response() hook, which
-- would make wrk parse every response in Lua.)
local prefix = os.getenv("CALLBACK_PREFIX") or "wrk-"
local step = tonumber(os.getenv("WRK_THREADS") or "2")
-- Seconds since the epoch that results "start" from, as bench/scenarios/callback.ts gives it: after
-- the requests were seeded, since a callback matches only a request submitted by its started + skew.
local EPOCH = tonumber(os.getenv("CALLBACK_EPOCH_S") or "1767225600")
-- "1": every result starts at EPOCH (a few seconds before the run, as a provider sends them: the
-- bench states); otherwise the n-th starts n seconds after it.
local FIXED_START = os.getenv("CALLBACK_FIXED_START") == "1"
local counter = 0

function setup(thread)
  thread:set("first", counter)
  counter = counter + 1
end

local n

function init(args)
  n = first
end

local function iso(seconds, millis)
  return os.date("!%Y-%m-%dT%H:%M:%S", EPOCH + seconds) .. string.format(".%03dZ", millis)
end

function request()
  local body = string.format(
    '{"customerUuid":"%s%d","started":"%s","finished":"%s","serviceType":"CREDIT_SCORE",' ..
    '"response":{"costSavingEnabled":false,"score":%d,"riskBand":%d,"limit":%d}}',
    prefix, n, iso(FIXED_START and 0 or n, 0), iso(FIXED_START and 0 or n, 750), 300 + (n % 600), 1 + (n % 5), (n % 4) * 1500)
  n = n + step
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"durationS":%.3f,"requests":%d,"non2xx":%d,"errors":%d,"p50":%.1f,"p99":%.1f,"max":%.1f}\n',
    summary.duration / 1e6, summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
