import { transportsHelp } from '../../src/cli/commands/channels-transports';
import { FORMATS } from '../../src/providers/formats';

/**
 * `channels create --help`'s list (test/cli/channels.test.ts checks the bin shows it): every transport
 * of the provider registry, its credential fields and an example.
 */
describe('the transports of channels create --help, from the provider registry', () => {
  const help = transportsHelp(FORMATS);

  it.each(FORMATS.filter((descriptor) => descriptor.credentials !== undefined).map((descriptor) => [descriptor.format, descriptor] as const))(
    '%s: its providers, credential fields, base URL and a channels create example',
    (format, descriptor) => {
      const section = help.slice(help.indexOf(`\n  ${format}: `));
      expect(section).not.toBe(help);
      const block = section.split('\n').slice(1, 6).join('\n');
      for (const field of descriptor.credentials?.fields ?? []) expect(block).toContain(field.name);
      for (const provider of descriptor.providers) expect(block).toContain(provider);
      expect(block).toContain(descriptor.defaultBaseUrl ?? 'required (--base-url)');
      expect(block).toMatch(new RegExp(`e\\.g\\. creative-gateway channels create .*--transport ${format} `));
    },
  );

  it('names no transport the registry does not have, and leaves out local (no channels)', () => {
    const listed = [...help.matchAll(/^ {2}([a-z0-9-]+): /gm)].map((match) => match[1]);
    expect(listed).toEqual(FORMATS.filter((descriptor) => descriptor.credentials !== undefined).map((descriptor) => descriptor.format));
  });
});
