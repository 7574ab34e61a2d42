-- wrk script of experiments/serve/bench.sh: every wrk thread reads its own file of request bodies (PREFIX.N for
-- thread N, one JSON body of POST /v1/check per line, each a distinct document) and sends one line per request;
-- a thread stops when its file ends, so the run checks every document exactly once. (wrk asks for one request
-- per thread before the first it sends, and drops it: bench.sh starts each file with an empty check for it.)
-- wrk itself runs until -d, so bench.sh interrupts it once the server holds every document. At the end it
-- prints one JSON line: responses counted, seconds, latency percentiles (ms), answers other than 200.
--   wrk -t2 -c16 -d3600s -s experiments/serve/wrk_check.lua http://127.0.0.1:7878 -- /tmp/bodies
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  local id = wrk.thread:get("id")
  file = assert(io.open(args[1] .. "." .. id, "r"))
  wrk.method = "POST"
  wrk.path = "/v1/check"
  wrk.headers["Content-Type"] = "application/json"
  not_ok = 0
end

function request()
  local line = file:read("*l")
  if line == nil then
    wrk.thread:stop()
    return wrk.format("GET", "/healthz", {}, nil)
  end
  return wrk.format(nil, nil, nil, line)
end

function response(status, headers, body)
  if status ~= 200 then
    not_ok = not_ok + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do
    bad = bad + (t:get("not_ok") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %.3f, "p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, "p999_ms": %.3f, ' ..
    '"max_ms": %.3f, "mean_ms": %.3f, "not_200": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency:percentile(99.9) / 1e3, latency.max / 1e3, latency.mean / 1e3, bad,
    e.connect + e.read + e.write + e.timeout))
end
