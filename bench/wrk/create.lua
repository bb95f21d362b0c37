-- POST a distinct URL per request to /shorten: each one creates a new link.
local n = 0
request = function()
  n = n + 1
  local body = '{"url":"https://example.com/bench/' .. n .. '/' .. math.random(1e9) .. '"}'
  return wrk.format("POST", "/shorten", {["Content-Type"] = "application/json"}, body)
end
