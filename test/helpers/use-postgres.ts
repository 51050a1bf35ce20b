// Jest setup file of the "postgres" project: the same tests, on PostgreSQL + Redis.
process.env.TEST_DB = 'postgres';
