// The sealing helper moved to src/shared/sealing.ts (webhook secrets use it too); channels keep this name.
export { Sealer as CredentialSealer } from '../shared/sealing';
