// Channel code's name for the AES-256-GCM sealing helper in src/shared/sealing.ts, which webhook secrets
// use too: here what it seals is a channel's credentials.
export { Sealer as CredentialSealer } from '../shared/sealing';
