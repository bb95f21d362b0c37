"""The single-box design linkraft's create and redirect numbers are compared
against: Flask + SQLite, auto-increment id → base62 code, click counter
incremented in the row on every redirect. Run it with Debian's gunicorn:

    gunicorn -w 4 -b 127.0.0.1:19280 --chdir bench/peers flask_sqlite:app
"""
import os
import sqlite3

from flask import Flask, g, jsonify, redirect, request

DB = os.environ.get("PEER_DB", "/tmp/linkraft-peer.sqlite")
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

app = Flask(__name__)


def db():
    if "db" not in g:
        g.db = sqlite3.connect(DB, timeout=30, isolation_level=None)
        g.db.execute("PRAGMA journal_mode=WAL")
        g.db.execute("PRAGMA synchronous=FULL")  # acknowledged means on disk, as linkraft's fsync
        g.db.execute(
            "CREATE TABLE IF NOT EXISTS urls (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " short_code TEXT UNIQUE, original_url TEXT NOT NULL, click_count INTEGER DEFAULT 0,"
            " created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
        )
    return g.db


@app.teardown_appcontext
def close(_):
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


def base62(n):
    s = ""
    while True:
        n, r = divmod(n, 62)
        s = ALPHABET[r] + s
        if n == 0:
            return s


@app.post("/shorten")
def shorten():
    url = (request.get_json(silent=True) or {}).get("url")
    if not url or not url.startswith(("http://", "https://")):
        return jsonify(error="invalid url"), 400
    conn = db()
    conn.execute("BEGIN IMMEDIATE")
    cur = conn.execute("INSERT INTO urls (original_url) VALUES (?)", (url,))
    code = base62(cur.lastrowid)
    conn.execute("UPDATE urls SET short_code = ? WHERE id = ?", (code, cur.lastrowid))
    conn.execute("COMMIT")
    return jsonify(short_code=code, short_url=request.host_url + code), 201


@app.get("/<code>")
def follow(code):
    conn = db()
    row = conn.execute("SELECT original_url FROM urls WHERE short_code = ?", (code,)).fetchone()
    if row is None:
        return jsonify(error="not found"), 404
    conn.execute("UPDATE urls SET click_count = click_count + 1 WHERE short_code = ?", (code,))
    return redirect(row[0], 302)
