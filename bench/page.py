"""The ViT tab driven over raw HTTP as its page drives it (upload, queue/join, the queue/data stream),
one client per instance: the soak of bench_load and the attacks of bench_abuse."""

from __future__ import annotations

import json
from pathlib import Path

import httpx


class Browser:
    """The ViT tab's private events as its page sends them: upload, queue/join, the queue/data stream."""

    def __init__(self, url: str, config: dict):
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(30, read=120))
        comps = config["components"]
        self.ids = {c["props"]["elem_id"]: c["id"] for c in comps if c["props"].get("elem_id")}
        self.names = {i: k for k, i in self.ids.items()}
        self.deps = {(c, ev): d for d in config["dependencies"] for c, ev in d["targets"]}
        self.start = {
            c["id"]: None if c["type"] == "state" else c["props"].get("value") for c in comps
        }  # page's values

    def upload(self, path: str) -> dict:
        with open(path, "rb") as f:
            r = self.http.post("/gradio_api/upload", files=[("files", (Path(path).name, f, "image/png"))])
        return {
            "path": r.raise_for_status().json()[0],
            "orig_name": Path(path).name,
            "mime_type": "image/png",
            "meta": {"_type": "gradio.FileData"},
        }

    def event(self, session: str, elem: str, event: str, values: dict) -> dict:
        """Run the event bound to (elem, event) in `session`; its outputs by elem_id (else component id)."""
        d = self.deps[self.ids[elem], event]
        sent = {**self.start, **{self.ids[k]: v for k, v in values.items()}}  # gr.State goes as null
        body = {
            "data": [sent[i] for i in d["inputs"]],
            "fn_index": d["id"],
            "trigger_id": self.ids[elem],
            "session_hash": session,
            "event_data": None,
        }
        event_id = self.http.post("/gradio_api/queue/join", json=body).raise_for_status().json()["event_id"]
        with self.http.stream("GET", "/gradio_api/queue/data", params={"session_hash": session}) as s:
            for line in s.iter_lines():
                m = json.loads(line[5:]) if line.startswith("data:") else {}
                if m.get("msg") == "process_completed" and m.get("event_id") == event_id:
                    if not m.get("success"):
                        raise RuntimeError(f"{elem}.{event} failed: {m.get('output', {}).get('error')}")
                    return {self.names.get(i, i): v for i, v in zip(d["outputs"], m["output"]["data"])}
                if m.get("msg") in ("unexpected_error", "close_stream"):
                    raise RuntimeError(f"{elem}.{event}: the stream ended: {m}")
        raise RuntimeError(f"{elem}.{event}: the stream ended without process_completed")
