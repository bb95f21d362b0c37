-- POST a distinct URL per request to /shorten: each one creates a new link.
-- Environment: LINKRAFT_KEY, the credential every create carries as
-- "Authorization: Bearer <key>" (an API key with links:write; linkraft
-- answers 401 to a create without one). Unset or empty: no header.
local headers = { ["Content-Type"] = "application/json" }

-- init runs in every thread's state.
function init(args)
  local key = os.getenv("LINKRAFT_KEY") or ""
  if key ~= "" then headers["Authorization"] = "Bearer " .. key end
end

local n = 0
request = function()
  n = n + 1
  local body = '{"url":"https://example.com/bench/' .. n .. '/' .. math.random(1e9) .. '"}'
  return wrk.format("POST", "/shorten", headers, body)
end
