#!/usr/bin/env python3
"""Writes dashboards/grafana/*.json. The JSON files are committed; edit this file and re-run
(`python3 dashboards/generate.py`) rather than editing the JSON by hand, so every dashboard
keeps the same datasource templating, variables and structure that tests/observability.rs checks."""
import json, os

RI = "$__rate_interval"
M = 'model=~"$model"'
DS = {"type": "prometheus", "uid": "${datasource}"}

def q(expr, legend=""):
    return {"expr": expr, "legendFormat": legend}

def hq(p, metric, sel, by="source"):
    return q(f'histogram_quantile({p}, sum by (le, {by}) (rate({metric}_bucket{{{sel}}}[{RI}])))',
             f"p{int(p*100) if p*100 == int(p*100) else p*100} {{{{{by}}}}}")

def mean(metric, sel):
    return f'(sum(rate({metric}_sum{{{sel}}}[{RI}])) / sum(rate({metric}_count{{{sel}}}[{RI}])))'

class Board:
    def __init__(self, uid, title, desc):
        self.uid, self.title, self.desc = uid, title, desc
        self.panels, self.y, self.x = [], 0, 0

    def panel(self, title, desc, targets, kind="timeseries", unit="short", w=12, h=8):
        if self.x + w > 24:
            self.x, self.y = 0, self.y + h
        pid = len(self.panels) + 1
        refs = "ABCDEFGHIJ"
        self.panels.append({
            "id": pid, "type": kind, "title": title, "description": desc, "datasource": DS,
            "gridPos": {"x": self.x, "y": self.y, "w": w, "h": h},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries" else {},
            "targets": [dict(t, refId=refs[i], datasource=DS) for i, t in enumerate(targets)],
        })
        self.x += w

    def json(self):
        return {
            "uid": self.uid, "title": self.title, "description": self.desc,
            "tags": ["tokentap"], "schemaVersion": 39, "version": 1, "editable": True,
            "time": {"from": "now-30m", "to": "now"}, "refresh": "5s",
            "templating": {"list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {"name": "model", "type": "query", "datasource": DS, "label": "model",
                 "query": {"query": "label_values(tokentap_requests_total, model)", "refId": "model"},
                 "definition": "label_values(tokentap_requests_total, model)",
                 "includeAll": True, "multi": True, "allValue": ".*",
                 "current": {"text": "All", "value": "$__all"}, "refresh": 2},
            ]},
            "annotations": {"list": []},
            "panels": self.panels,
        }

boards = []

b = Board("tokentap-overview", "tokentap / Overview", "Throughput, latency percentiles, SLO attainment, errors, in flight. Client (source=client) and wire (source=wire) side by side.")
b.panel("Turns/s", "Finished turns per second, by view.", [q(f'sum by (source) (rate(tokentap_requests_total{{{M}}}[{RI}]))', "{{source}}")], unit="reqps")
b.panel("Output tokens/s", "Output tokens per second (server usage or chunk count, see records).", [q(f'sum by (source) (rate(tokentap_output_tokens_total{{{M}}}[{RI}]))', "{{source}}")])
for name, metric in [("TTFT", "tokentap_ttft_seconds"), ("ITL (per token)", "tokentap_itl_seconds"), ("E2E", "tokentap_e2e_seconds")]:
    b.panel(f"{name} p50 / p95 / p99", f"{name} percentiles from live histogram buckets (for watching; published numbers come from raw samples).",
            [hq(p, metric, M) for p in (0.5, 0.95, 0.99)], unit="s", w=8)
b.panel("SLO: TTFT ≤ 1 s", "Share of turns whose wire TTFT was within 1 s (bucket boundary le=1).",
        [q(f'sum(rate(tokentap_ttft_seconds_bucket{{source="wire",le="1",{M}}}[{RI}])) / sum(rate(tokentap_ttft_seconds_count{{source="wire",{M}}}[{RI}]))')], kind="stat", unit="percentunit", w=6)
b.panel("SLO: ITL ≤ 50 ms", "Share of tokens whose wire ITL was within 50 ms (le=0.05).",
        [q(f'sum(rate(tokentap_itl_seconds_bucket{{source="wire",le="0.05",{M}}}[{RI}])) / sum(rate(tokentap_itl_seconds_count{{source="wire",{M}}}[{RI}]))')], kind="stat", unit="percentunit", w=6)
b.panel("Error share by source", "Share of turns by error source (none = succeeded), per view.",
        [q(f'sum by (source, error_source) (rate(tokentap_requests_total{{{M}}}[{RI}])) / ignoring(error_source) group_left sum by (source) (rate(tokentap_requests_total{{{M}}}[{RI}]))', "{{source}} {{error_source}}")], unit="percentunit", w=6)
b.panel("In flight", "Requests in flight now.", [q('tokentap_in_flight', "{{source}}")], w=6)
b.panel("Turns/s by API (wire)", "Finished turns per second the proxy measured, by route: chat completions, completions, the Responses API, the Messages API.",
        [q(f'sum by (route) (rate(tokentap_requests_total{{source="wire",route!="other",{M}}}[{RI}]))', "{{route}}")], unit="reqps", w=24)
boards.append(b)

b = Board("tokentap-agentic", "tokentap / Agentic", "Context growth, KV-cache reuse, sessions, and TTFT as contexts grow.")
b.panel("Context growth: prompt tokens per turn", "Median and p95 prompt tokens per turn (needs usage).",
        [hq(0.5, "tokentap_prompt_tokens_per_turn", M), hq(0.95, "tokentap_prompt_tokens_per_turn", M)])
b.panel("Cached-token share", "Σ cached / Σ prompt tokens over the interval, per view.",
        [q(f'sum by (source) (rate(tokentap_cached_tokens_total{{{M}}}[{RI}])) / sum by (source) (rate(tokentap_prompt_tokens_total{{{M}}}[{RI}]))', "{{source}}")], unit="percentunit")
b.panel("Turns per session", "Mean turns per session (proxy: sessions in its table; client: turns issued per started trajectory).",
        [q('tokentap_turns_per_session', "{{source}}")], w=8)
b.panel("Active sessions", "Sessions in the proxy's table; conversations in progress at the client.",
        [q('tokentap_active_sessions', "{{source}}")], w=8)
b.panel("Delay queue and window", "Client conversations sleeping in an inter-turn delay; 1 while the performance window is open.",
        [q('tokentap_delay_queue', "delay queue"), q('tokentap_in_window', "in window")], w=8)
b.panel("TTFT against context size", "Mean wire TTFT (left) and mean prompt tokens per turn (right) over the same intervals: does TTFT climb as contexts grow?",
        [q(mean("tokentap_ttft_seconds", f'source="wire",{M}'), "mean TTFT (s)"),
         q(mean("tokentap_prompt_tokens_per_turn", f'source="wire",{M}'), "mean prompt tokens")], w=24)
boards.append(b)

b = Board("tokentap-client-vs-wire", "tokentap / Client vs wire", "The replay's TTFT and E2E against the proxy's; the difference is the client's own overhead plus the proxy hop.")
for name, metric in [("TTFT", "tokentap_ttft_seconds"), ("E2E", "tokentap_e2e_seconds")]:
    b.panel(f"{name} p50 and p95 by view", f"{name} as the client and the wire saw it.", [hq(0.5, metric, M), hq(0.95, metric, M)], unit="s")
    b.panel(f"{name}: client minus wire (mean)", f"Mean client {name} minus mean wire {name}: time spent in the client and the hop.",
            [q(mean(metric, 'source="client",' + M) + " - " + mean(metric, 'source="wire",' + M), "client − wire")], unit="s")
boards.append(b)

# Engines label their series `model_name` (vLLM and SGLang), not `model`: the same $model filter
# is applied to that label. The sim exports the vLLM series (it plays vLLM), so every vLLM query
# here is tested with data by tests/observability.rs.
EM = 'model_name=~"$model"'
b = Board("tokentap-proxy-vs-engine", "tokentap / Proxy vs engine", "Proxy TTFT minus the engine's own TTFT (vLLM / SGLang / TensorRT-LLM, which start at tokenization): time spent outside the engine. Empty when the engine's series are not scraped.")
b.panel("Proxy TTFT − vLLM TTFT (mean)", "Requires vllm:time_to_first_token_seconds.",
        [q(mean("tokentap_ttft_seconds", f'source="wire",{M}') + " - " + mean("vllm:time_to_first_token_seconds", EM), "outside vLLM")], unit="s")
b.panel("Proxy TTFT − SGLang TTFT (mean)", "Requires sglang:time_to_first_token_seconds.",
        [q(mean("tokentap_ttft_seconds", f'source="wire",{M}') + " - " + mean("sglang:time_to_first_token_seconds", EM), "outside SGLang")], unit="s")
b.panel("Engine TTFT and ITL p95", "The engines' own histograms (same bucket boundaries as ours).",
        [q(f'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{EM}}}[{RI}])))', "vLLM TTFT"),
         q(f'histogram_quantile(0.95, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket{{{EM}}}[{RI}])))', "vLLM ITL"),
         q(f'histogram_quantile(0.95, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket{{{EM}}}[{RI}])))', "SGLang TTFT"),
         q(f'histogram_quantile(0.95, sum by (le) (rate(trtllm_time_to_first_token_seconds_bucket{{{EM}}}[{RI}])))', "TensorRT-LLM TTFT")], unit="s")
b.panel("Prefix-cache hit rate: engine vs wire", "vLLM prefix-cache hits / queries (tokens) against the wire's cached-token share.",
        [q(f'sum(rate(vllm:prefix_cache_hits_total{{{EM}}}[{RI}])) / sum(rate(vllm:prefix_cache_queries_total{{{EM}}}[{RI}]))', "vLLM"),
         q(f'sum(rate(tokentap_cached_tokens_total{{source="wire",{M}}}[{RI}])) / sum(rate(tokentap_prompt_tokens_total{{source="wire",{M}}}[{RI}]))', "wire"),
         q(f'sum(rate(trtllm_prompt_cached_tokens_total{{{EM}}}[{RI}])) / sum(rate(trtllm_prompt_tokens_total{{{EM}}}[{RI}]))', "TensorRT-LLM")], unit="percentunit")
b.panel("Proxy TTFT − TensorRT-LLM TTFT (mean)", "Requires trtllm_time_to_first_token_seconds.",
        [q(mean("tokentap_ttft_seconds", f'source="wire",{M}') + " - " + mean("trtllm_time_to_first_token_seconds", EM), "outside TensorRT-LLM")], unit="s")
boards.append(b)

b = Board("tokentap-proxy-health", "tokentap / Proxy health", "Is the proxy itself keeping up: its own time per chunk, evictions, upstream errors, records.")
b.panel("Proxy processing time per chunk", "p50 / p99 of the proxy's own work per response chunk (sampled 1 in 8).",
        [q(f'histogram_quantile({p}, sum by (le) (rate(tokentap_proxy_chunk_processing_seconds_bucket[{RI}])))', f"p{int(p*100)}") for p in (0.5, 0.99)], unit="s")
b.panel("Session evictions/s", "Sessions evicted from the table (TTL or size).",
        [q(f'rate(tokentap_session_evictions_total[{RI}])', "evictions")])
b.panel("Upstream requests and errors", "Requests per upstream, and errors by upstream and kind (connect, reset, timeout, stale_connection, busy; exported as 0 from the start).",
        [q(f'sum by (upstream) (rate(tokentap_upstream_requests_total[{RI}]))', "{{upstream}}"),
         q(f'sum by (upstream, kind) (rate(tokentap_upstream_errors_total[{RI}]))', "errors {{upstream}} {{kind}}")], unit="reqps")
b.panel("Records written / lost", "Records the proxy wrote, dropped (writer queue full) and failed to write (disk full, read-only); /health says degraded once one is lost.",
        [q(f'rate(tokentap_proxy_records_written_total[{RI}])', "written"), q(f'rate(tokentap_proxy_records_dropped_total[{RI}])', "dropped"),
         q(f'rate(tokentap_proxy_records_failed_total[{RI}])', "failed")])
b.panel("Streams without usage", "Streams that ended without a usage chunk (token counts then come from chunks).",
        [q(f'sum by (source) (rate(tokentap_streams_without_usage_total[{RI}])) or on() vector(0)', "{{source}}")])
b.panel("Tokens per chunk (p50 / p95)", "Several tokens per chunk: speculative decoding, stream interval, parsers.",
        [hq(0.5, "tokentap_tokens_per_chunk", M), hq(0.95, "tokentap_tokens_per_chunk", M)])
boards.append(b)

# `generate.py DIR` writes elsewhere (tests/observability.rs compares that with the committed JSON).
import sys
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "grafana")
for bd in boards:
    with open(os.path.join(out, bd.uid.removeprefix("tokentap-") + ".json"), "w") as f:
        json.dump(bd.json(), f, indent=2, ensure_ascii=False)
        f.write("\n")
