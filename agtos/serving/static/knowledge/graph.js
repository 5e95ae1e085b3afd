// A small force-directed graph on a <canvas>: the selected entity pinned in the centre,
// its neighbours pushed apart (repulsion), pulled to a rest length (springs) and damped.
"use strict";

(function () {
  const COLORS = {
    person: "#3b6cf6", place: "#1fa56b", organization: "#e67e22", event: "#d0396f", thing: "#8257d6",
    animal: "#0e9aa7",
  };
  let running = null; // the animation of the graph currently shown

  function setup(canvas) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || canvas.width;
    const h = canvas.clientHeight || canvas.height;
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(h * ratio);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    return { ctx, w, h };
  }

  function build(center, rels, w, h) {
    const nodes = [{ id: center.id, name: center.name, type: center.type, x: w / 2, y: h / 2, vx: 0, vy: 0, pinned: true }];
    const index = { [center.id]: nodes[0] };
    const edges = [];
    rels.forEach((rel, i) => {
      const o = rel.other;
      if (!index[o.id]) {
        const angle = (2 * Math.PI * i) / Math.max(rels.length, 1);
        const node = { id: o.id, name: o.name, type: o.type, vx: 0, vy: 0, pinned: false,
          x: w / 2 + Math.cos(angle) * 90, y: h / 2 + Math.sin(angle) * 90 };
        index[o.id] = node;
        nodes.push(node);
      }
      const out = rel.direction === "out";
      edges.push({ a: out ? nodes[0] : index[o.id], b: out ? index[o.id] : nodes[0], label: rel.type });
    });
    return { nodes, edges };
  }

  function step(g, w, h) {
    const { nodes, edges } = g;
    for (let i = 0; i < nodes.length; i++) {
      for (let j = i + 1; j < nodes.length; j++) {
        const a = nodes[i], b = nodes[j];
        let dx = b.x - a.x, dy = b.y - a.y;
        const d2 = Math.max(dx * dx + dy * dy, 25);
        const f = 9000 / d2, d = Math.sqrt(d2);
        dx /= d; dy /= d;
        a.vx -= dx * f; a.vy -= dy * f; b.vx += dx * f; b.vy += dy * f;
      }
    }
    for (const e of edges) {
      const dx = e.b.x - e.a.x, dy = e.b.y - e.a.y;
      const d = Math.max(Math.sqrt(dx * dx + dy * dy), 1);
      const f = (d - 130) * 0.04;
      e.a.vx += (dx / d) * f; e.a.vy += (dy / d) * f; e.b.vx -= (dx / d) * f; e.b.vy -= (dy / d) * f;
    }
    let energy = 0;
    for (const n of nodes) {
      if (n.pinned) { n.vx = n.vy = 0; continue; }
      n.vx += (w / 2 - n.x) * 0.004; n.vy += (h / 2 - n.y) * 0.004;
      n.vx *= 0.82; n.vy *= 0.82;
      n.x = Math.min(w - 40, Math.max(40, n.x + n.vx));
      n.y = Math.min(h - 24, Math.max(24, n.y + n.vy));
      energy += n.vx * n.vx + n.vy * n.vy;
    }
    return energy;
  }

  function arrow(ctx, a, b) {
    const dx = b.x - a.x, dy = b.y - a.y, d = Math.max(Math.sqrt(dx * dx + dy * dy), 1);
    const ux = dx / d, uy = dy / d, tipX = b.x - ux * 15, tipY = b.y - uy * 15;
    ctx.beginPath();
    ctx.moveTo(a.x + ux * 15, a.y + uy * 15);
    ctx.lineTo(tipX, tipY);
    ctx.stroke();
    ctx.beginPath();
    ctx.moveTo(tipX, tipY);
    ctx.lineTo(tipX - ux * 8 - uy * 4, tipY - uy * 8 + ux * 4);
    ctx.lineTo(tipX - ux * 8 + uy * 4, tipY - uy * 8 - ux * 4);
    ctx.closePath();
    ctx.fill();
  }

  function draw(ctx, g, w, h) {
    ctx.clearRect(0, 0, w, h);
    ctx.lineWidth = 1.4;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    for (const e of g.edges) {
      ctx.strokeStyle = ctx.fillStyle = "#9aa3b8";
      arrow(ctx, e.a, e.b);
      const mx = (e.a.x + e.b.x) / 2, my = (e.a.y + e.b.y) / 2;
      const tw = ctx.measureText(e.label).width + 8;
      ctx.fillStyle = "rgba(255,255,255,0.9)";
      ctx.fillRect(mx - tw / 2, my - 8, tw, 15);
      ctx.fillStyle = "#4a5368";
      ctx.fillText(e.label, mx, my + 3);
    }
    ctx.font = "12px system-ui, sans-serif";
    for (const n of g.nodes) {
      ctx.beginPath();
      ctx.arc(n.x, n.y, n.pinned ? 14 : 11, 0, 2 * Math.PI);
      ctx.fillStyle = COLORS[n.type] || "#6b7386";
      ctx.fill();
      ctx.lineWidth = n.pinned ? 3 : 1.5;
      ctx.strokeStyle = "#fff";
      ctx.stroke();
      ctx.fillStyle = "#1d2333";
      ctx.fillText(n.name, n.x, n.y + (n.pinned ? 30 : 26));
    }
  }

  // Draw `center` and its relationships; clicking a neighbour calls onSelect(id).
  function render(canvas, center, rels, onSelect) {
    if (running) cancelAnimationFrame(running);
    const { ctx, w, h } = setup(canvas);
    const g = build(center, rels, w, h);
    canvas.dataset.nodes = String(g.nodes.length);
    canvas.dataset.edges = String(g.edges.length);
    canvas.dataset.labels = g.nodes.map((n) => n.name).join("|");
    canvas.onclick = (ev) => {
      const box = canvas.getBoundingClientRect();
      const x = ev.clientX - box.left, y = ev.clientY - box.top;
      const hit = g.nodes.find((n) => !n.pinned && (n.x - x) ** 2 + (n.y - y) ** 2 < 15 * 15);
      if (hit && onSelect) onSelect(hit.id);
    };
    let ticks = 0;
    const frame = () => {
      const energy = step(g, w, h);
      draw(ctx, g, w, h);
      ticks += 1;
      running = ticks < 300 && energy > 0.01 ? requestAnimationFrame(frame) : null;
      if (!running) canvas.dataset.settled = "true";
    };
    canvas.dataset.settled = "false";
    frame();
  }

  window.KnowledgeGraph = { render };
})();
