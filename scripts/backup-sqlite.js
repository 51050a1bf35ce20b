#!/usr/bin/env node
// `npm run backup -- <file>`: an online copy of the SQLite database (DATABASE_URL, default
// ./data/gateway.db) while the gateway runs. SQLite's backup API copies a consistent snapshot
// page by page; writers keep going (WAL). On PostgreSQL use pg_dump instead.
'use strict';
require('./supported-node').requireSupportedNode();
const path = require('node:path');
const SQLite = require('better-sqlite3');

const destination = process.argv[2];
const source = (process.env.DATABASE_URL || './data/gateway.db').replace(/^sqlite:/, '');
if (!destination) {
  console.error('usage: npm run backup -- <backup file>   (copies DATABASE_URL, default ./data/gateway.db)');
  process.exit(2);
}
if (/^[a-z][a-z0-9+.-]+:\/\//i.test(source)) {
  console.error('creative-gateway: DATABASE_URL is not a SQLite file; back up PostgreSQL with pg_dump');
  process.exit(2);
}
const database = new SQLite(source, { fileMustExist: true });
database
  .backup(destination)
  .then(({ totalPages }) => {
    console.log(`creative-gateway: backed up ${path.resolve(source)} to ${path.resolve(destination)} (${totalPages} pages)`);
    database.close();
  })
  .catch((error) => {
    console.error(`creative-gateway: backup failed: ${error.message}`);
    process.exit(1);
  });
