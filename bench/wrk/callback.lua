-- wrk script: every request a distinct provider result, for customer CALLBACK_PREFIX .. n (n, setup,
-- init, done: common.lua); the requests are seeded as 'submitted' beforehand.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")
local prefix = os.getenv("CALLBACK_PREFIX") or "wrk-"
-- Seconds since the epoch that results "start" from, as bench/scenarios/callback.ts gives it: after
-- the requests were seeded, since a callback matches only a request submitted by its started + skew.
local EPOCH = tonumber(os.getenv("CALLBACK_EPOCH_S") or "1767225600")
-- "1": every result starts at EPOCH (a few seconds before the run, as a provider sends them: the
-- bench states); otherwise the n-th starts n seconds after it.
local FIXED_START = os.getenv("CALLBACK_FIXED_START") == "1"
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
