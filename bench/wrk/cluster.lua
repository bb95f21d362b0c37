-- wrk script for bench/cluster.sh: writes with a distinct key per request,
-- spread over several servers, with every response status counted.
--
-- Environment (read by wrk's main Lua state in setup()):
--   WRK_KIND     "linkraft": POST /api/v1/urls {"url": "https://example.com/bench/<run>/<thread>/<n>"}
--                "etcd":     POST <WRK_PATH> {"key": b64("bench/<run>/<thread>/<n>"), "value": b64(<same URL>)}
--   WRK_PATH     etcd's gRPC-gateway put path (/v3/kv/put or /v3beta/kv/put)
--   WRK_TARGETS  host:port[,host:port...]; thread i (from 1) connects to
--                target ((i-1) mod N)+1 for the whole run, so with -t N
--                every target gets exactly -c/N connections
--   WRK_RUN      a tag that keeps keys distinct across runs
--   LINKRAFT_KEY the credential linkraft creates carry, as
--                "Authorization: Bearer <key>" (an API key with links:write;
--                creates without one are answered 401); etcd puts carry none
--
-- done() prints one line that bench/cluster.sh parses:
--   RESULT duration_s=.. requests=.. ok=.. non2xx=.. connect=.. read=.. write=.. timeout=.. statuses=201:n,503:n
-- ok counts 2xx responses only; a server answering errors fast cannot pass
-- for throughput.

local kind = os.getenv("WRK_KIND") or "linkraft"
local etcd_path = os.getenv("WRK_PATH") or "/v3/kv/put"
local run = os.getenv("WRK_RUN") or tostring(os.time())

-- main state: thread placement and, in done(), the status totals
local threads = {}
local addrs = nil

function setup(thread)
  if not addrs then
    addrs = {}
    for t in string.gmatch(os.getenv("WRK_TARGETS") or "", "[^,]+") do
      local host, port = t:match("^(.*):(%d+)$")
      local a = wrk.lookup(host, port)
      if not a or #a == 0 then error("cannot resolve " .. t) end
      addrs[#addrs + 1] = a[1]
    end
    if #addrs == 0 then error("WRK_TARGETS is empty") end
  end
  local i = #threads + 1
  thread.addr = addrs[(i - 1) % #addrs + 1]
  thread:set("tid", i)
  threads[i] = thread
end

-- thread states
statuses = {}
local n = 0

local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
  local out = {}
  local floor = math.floor
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local c1 = floor(v / 262144) % 64
    local c2 = floor(v / 4096) % 64
    local c3 = floor(v / 64) % 64
    local c4 = v % 64
    out[#out + 1] = alphabet:sub(c1 + 1, c1 + 1) .. alphabet:sub(c2 + 1, c2 + 1)
      .. (b and alphabet:sub(c3 + 1, c3 + 1) or "=")
      .. (c and alphabet:sub(c4 + 1, c4 + 1) or "=")
  end
  return table.concat(out)
end

local json = { ["Content-Type"] = "application/json" }
local lk_headers = { ["Content-Type"] = "application/json" }

-- init runs in every thread's state: the key goes into the headers of the
-- linkraft creates that thread sends.
function init(args)
  local key = os.getenv("LINKRAFT_KEY") or ""
  if key ~= "" then lk_headers["Authorization"] = "Bearer " .. key end
end

request = function()
  n = n + 1
  local id = run .. "/" .. tostring(tid) .. "/" .. n
  local url = "https://example.com/bench/" .. id
  if kind == "etcd" then
    local body = '{"key":"' .. b64("bench/" .. id) .. '","value":"' .. b64(url) .. '"}'
    return wrk.format("POST", etcd_path, json, body)
  end
  return wrk.format("POST", "/api/v1/urls", lk_headers, '{"url":"' .. url .. '"}')
end

response = function(status, headers, body)
  local k = tostring(status)
  statuses[k] = (statuses[k] or 0) + 1
end

done = function(summary, latency, requests)
  local total, ok = {}, 0
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses") or {}) do
      total[k] = (total[k] or 0) + v
    end
  end
  local keys = {}
  for k, v in pairs(total) do
    keys[#keys + 1] = k
    if k:sub(1, 1) == "2" then ok = ok + v end
  end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. ":" .. total[k] end
  local e = summary.errors
  io.write(string.format(
    "RESULT duration_s=%.3f requests=%d ok=%d non2xx=%d connect=%d read=%d write=%d timeout=%d statuses=%s\n",
    summary.duration / 1e6, summary.requests, ok, summary.requests - ok,
    e.connect, e.read, e.write, e.timeout, #parts > 0 and table.concat(parts, ",") or "none"))
end
