-- wrk script: GET one customer, GET_ONE_PREFIX .. ((n * 7919) % GET_ONE_CUSTOMERS) as
-- bench/scenarios/get-one.ts builds the paths (n, setup, init, done: common.lua).
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")
local prefix = os.getenv("GET_ONE_PREFIX") or "q-"
local customers = tonumber(os.getenv("GET_ONE_CUSTOMERS") or "1000")

function request()
  local path = string.format("/v1/underwritings/%s%d", prefix, (n * 7919) % customers)
  n = n + step
  return wrk.format("GET", path)
end
