// The benchmark's upstream: a tiny HTTP server answering `POST /images/generations` in Ark's wire format
// (one image per call, `size` echoed, `usage`), with the 1x1 PNG as b64_json or a URL. FAKE_WIRE=openai answers
// in OpenAI's instead (platform.openai.com/docs/api-reference/images/create: `created`, `data` of
// `{b64_json}` or `{url}`, token `usage`; what an OpenAI-compatible server sends). FAKE_DELAY_MS delays
// every answer (slow generations). Prints `listening PORT`; `GET /stats` answers the calls seen and in flight.
const http = require('node:http');

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC';
const delayMs = Number(process.env.FAKE_DELAY_MS ?? 0);
const openai = process.env.FAKE_WIRE === 'openai';
let calls = 0;
let inFlight = 0;
let maxInFlight = 0;

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ calls, inFlight, maxInFlight }));
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end('{"error":{"code":"BadRequest","message":"not JSON"}}');
    }
    calls += 1;
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const answer = () => {
      inFlight -= 1;
      const image = body.response_format === 'b64_json' ? { b64_json: PNG } : { url: `http://${req.headers.host}/files/${calls}.png` };
      const text = JSON.stringify(
        openai
          ? {
              created: Math.floor(Date.now() / 1000),
              data: [image],
              usage: { total_tokens: 4176, input_tokens: 16, output_tokens: 4160, input_tokens_details: { text_tokens: 16, image_tokens: 0 } },
            }
          : {
              model: body.model,
              created: Math.floor(Date.now() / 1000),
              data: [{ ...image, size: body.size ?? '1024x1024' }],
              usage: { generated_images: 1, output_tokens: 16384, total_tokens: 16384 },
            },
      );
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.maxRequestsPerSocket = 0;
server.listen(0, '127.0.0.1', 4096, () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
