// The upstream-path baseline: a bare Express 5 app that forwards `POST /images/generate` to the fake
// upstream (UPSTREAM_URL) with the global fetch, as a minimal proxy would, and answers the gateway's shape;
// `POST /v1/images/generations` (OpenAI's API) it forwards as it came and relays the answer's JSON.
const express = require('express');

const upstream = `${process.env.UPSTREAM_URL}/images/generations`;
const app = express();
app.use(express.json());
app.post('/images/generate', async (req, res) => {
  try {
    const response = await fetch(upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench-ark-key' },
      body: JSON.stringify({ model: 'doubao-seedream-4-5-251128', prompt: req.body.prompt, size: '2048x2048', response_format: req.body.response_format }),
    });
    const answer = await response.json();
    res.status(response.status).json({
      id: 'gen_2x7Qd9mKp3LrT8vWzY4nB1',
      created: answer.created,
      model: req.body.model,
      provider: 'jimeng',
      data: answer.data.map((d) => ({ b64_json: d.b64_json, url: d.url, width: 2048, height: 2048 })),
      usage: { images: 1, credits_charged: 4, credits_remaining: 999 },
    });
  } catch (error) {
    res.status(502).json({ error: { code: 'provider_error', message: String(error) } });
  }
});
app.post('/v1/images/generations', async (req, res) => {
  try {
    const response = await fetch(upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench-openai-key' },
      body: JSON.stringify(req.body),
    });
    res.status(response.status).json(await response.json());
  } catch (error) {
    res.status(502).json({ error: { code: 'provider_error', message: String(error) } });
  }
});
const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
