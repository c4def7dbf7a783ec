#!/usr/bin/env python3
"""Deterministic implementations of the example tools in this folder, for `--tool-exec`.

    structgen run --tools grammars/tools/weather.json --tool-exec grammars/tools/run.py ...

Reads one call from stdin, `{"name": ..., "arguments": {...}}`, and prints its result as JSON on
stdout. The same call always gets the same result: weather comes from a fixed table (other cities
from a hash of the name), calendar and file tools work on a fixed, in-memory example state and
never touch the real disk or clock. A call this file cannot serve exits 1 with the reason on
stderr, which structgen turns into an error result the model sees.
"""
import hashlib
import json
import sys

CITIES = {
    "paris": (18, "partly cloudy", 62),
    "london": (14, "light rain", 81),
    "tokyo": (22, "clear", 55),
    "new york": (20, "sunny", 48),
    "berlin": (16, "overcast", 70),
    "san francisco": (17, "fog", 77),
}

FILES = {
    "/home/user/notes.txt": "Buy milk.\nCall Alice about the trip.\n",
    "/home/user/todo.md": "- [ ] finish the report\n- [x] book flights\n",
}

EVENTS = [
    {"title": "Team sync", "start": "2026-11-24T10:00:00Z", "duration_minutes": 30},
    {"title": "Dentist", "start": "2026-11-26T15:30:00Z", "duration_minutes": 45},
]


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def city_weather(location):
    key = location.strip().split(",")[0].lower()
    if key in CITIES:
        return CITIES[key]
    h = hashlib.sha256(key.encode()).digest()
    skies = ["sunny", "clear", "partly cloudy", "overcast", "light rain", "windy"]
    return (h[0] % 35 - 5, skies[h[1] % len(skies)], 30 + h[2] % 60)


def to_unit(celsius, unit):
    return round(celsius * 9 / 5 + 32) if unit == "fahrenheit" else celsius


def get_weather(location, unit="celsius"):
    temp, sky, humidity = city_weather(location)
    return {"location": location, "temperature": to_unit(temp, unit), "unit": unit,
            "conditions": sky, "humidity_pct": humidity}


def get_forecast(location, days):
    temp, sky, _ = city_weather(location)
    if not 1 <= days <= 14:
        fail(f"days must be between 1 and 14, got {days}")
    return {"location": location, "days": [
        {"day": i + 1, "high_c": temp + (i * 3) % 5, "low_c": temp - 6 + (i * 2) % 4, "conditions": sky}
        for i in range(days)]}


def create_event(title, start, duration_minutes=60, attendees=(), reminder=False):
    event_id = hashlib.sha256(f"{title}|{start}".encode()).hexdigest()[:8]
    return {"id": event_id, "title": title, "start": start, "duration_minutes": duration_minutes,
            "attendees": list(attendees), "reminder": reminder, "status": "created"}


def list_events(**span):
    lo, hi = span["from"], span["to"]
    return {"events": [e for e in EVENTS if lo <= e["start"][:10] <= hi]}


def read_file(path, max_bytes=None):
    if path not in FILES:
        fail(f"no such file: {path}")
    text = FILES[path]
    return {"path": path, "content": text[:max_bytes] if max_bytes else text}


def write_file(path, content, mode="overwrite"):
    return {"path": path, "bytes_written": len(content.encode()), "mode": mode}


def list_directory(path):
    prefix = path.rstrip("/") + "/"
    return {"path": path, "entries": sorted(p[len(prefix):] for p in FILES if p.startswith(prefix))}


TOOLS = {f.__name__: f for f in [get_weather, get_forecast, create_event, list_events,
                                 read_file, write_file, list_directory]}


def main():
    try:
        call = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        fail(f"the call on stdin is not JSON: {e}")
    name, args = call.get("name"), call.get("arguments", {})
    if name not in TOOLS:
        fail(f"unknown tool {name!r} (known: {', '.join(TOOLS)})")
    try:
        result = TOOLS[name](**args)
    except TypeError as e:
        fail(f"{name}: bad arguments: {e}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
