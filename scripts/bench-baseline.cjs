// The benchmark's baseline: a bare Express 5 app answering a gateway-sized JSON body.
const express = require('express');

const app = express();
app.use(express.json());
const body = {
  id: 'gen_2x7Qd9mKp3LrT8vWzY4nB1',
  created: 1795379400,
  model: 'local-1',
  provider: 'local',
  data: [{ b64_json: 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC', width: 1, height: 1 }],
  usage: { images: 1, credits_charged: 1, credits_remaining: 999 },
};
app.post('/images/generate', (_req, res) => {
  res.json(body);
});
const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
