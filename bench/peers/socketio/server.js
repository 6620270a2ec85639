// socket.io 4 peer for the Switchboard benchmarks.
// Rooms via a `join` event (acknowledged), an HTTP publish endpoint
// `POST /pub?room=ROOM` (body = the message, emitted as event "msg"), and
// connectionStateRecovery on (so a dropped client can resume, like a
// Switchboard cursor). WebSocket transport only. Usage: node server.js PORT
"use strict";
const http = require("http");
const { Server } = require("socket.io");

const port = Number(process.argv[2] || 3000);
const srv = http.createServer((req, res) => {
  if (req.method === "POST" && req.url.startsWith("/pub")) {
    const room = new URL(req.url, "http://x").searchParams.get("room");
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      io.to(room).emit("msg", Buffer.concat(chunks).toString("utf8"));
      res.writeHead(204);
      res.end();
    });
    return;
  }
  if (req.url === "/healthz") {
    res.writeHead(200);
    res.end("ok");
    return;
  }
  res.writeHead(404);
  res.end();
});
const io = new Server(srv, {
  transports: ["websocket"],
  connectionStateRecovery: {
    maxDisconnectionDuration: 15 * 60 * 1000,
    skipMiddlewares: true,
  },
});
io.on("connection", (socket) => {
  socket.on("join", (room, ack) => {
    socket.join(room);
    if (typeof ack === "function") ack("ok");
  });
});
srv.keepAliveTimeout = 120000;
srv.listen(port, "127.0.0.1", () => console.log(`socket.io peer on 127.0.0.1:${port}`));
