import net from 'node:net';

/** Whether any process of the group `groupId` (a detached child's pid) is still running. */
export function groupAlive(groupId: number): boolean {
  try {
    process.kill(-groupId, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills whatever is left of a detached child's group (test cleanup). */
export function killGroup(groupId: number | undefined): void {
  if (groupId !== undefined && groupAlive(groupId)) process.kill(-groupId, 'SIGKILL');
}

/** Resolves true when nothing accepts connections at `url` any more. */
export function portClosed(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}
