import { type ComponentChildren, createContext } from 'preact';
import { useCallback, useContext, useEffect, useState } from 'preact/hooks';

let nextId = 0;
const newId = (prefix: string) => `${prefix}-${++nextId}`;

/**
 * The form a field is in (a panel's or a filter bar's name). Its fields' accessible names end with it
 * ("Owner (Create key)"), visually hidden, so that no two controls on a page share a name when a
 * filter bar and a form, or two forms, ask for the same thing.
 */
const FormName = createContext<string | undefined>(undefined);

/** A field's label: what it shows, and the form it is in for assistive technology. */
function LabelText({ text }: { text: string }) {
  const form = useContext(FormName);
  return (
    <>
      {text}
      {form && <span class="visually-hidden"> ({form})</span>}
    </>
  );
}

/** A visually short row button ("Quota") whose accessible name says which row it acts on ("Quota of console-made"). */
export function RowButton(props: { label: string; of: string; onClick: () => void; danger?: boolean }) {
  return (
    <button type="button" class={props.danger ? 'small danger' : 'small'} onClick={props.onClick}>
      {props.label}
      <span class="visually-hidden"> of {props.of}</span>
    </button>
  );
}

/** A labelled input: the label names it for people, screen readers and tests. */
export function Field(props: {
  label: string;
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'password' | 'number' | 'url' | 'datetime-local';
  required?: boolean;
  placeholder?: string;
  hint?: string;
  min?: number;
  autoComplete?: string;
}) {
  const [id] = useState(() => newId('field'));
  return (
    <div class="field">
      <label for={id}>
        <LabelText text={props.label} />
      </label>
      <input
        id={id}
        // One branch of preact's per-type input attributes: the others differ only in which extras they allow.
        type={(props.type ?? 'text') as 'text'}
        value={props.value}
        required={props.required}
        placeholder={props.placeholder}
        min={props.min}
        autoComplete={props.autoComplete ?? 'off'}
        aria-describedby={props.hint ? `${id}-hint` : undefined}
        onInput={(event) => props.onInput((event.currentTarget as HTMLInputElement).value)}
      />
      {props.hint && (
        <small id={`${id}-hint`} class="hint">
          {props.hint}
        </small>
      )}
    </div>
  );
}

/** A labelled multi-line input (a list, one entry a line). */
export function TextArea(props: { label: string; value: string; onInput: (value: string) => void; hint?: string; rows?: number }) {
  const [id] = useState(() => newId('text'));
  return (
    <div class="field">
      <label for={id}>
        <LabelText text={props.label} />
      </label>
      <textarea
        id={id}
        value={props.value}
        rows={props.rows ?? 3}
        spellcheck={false}
        aria-describedby={props.hint ? `${id}-hint` : undefined}
        onInput={(event) => props.onInput((event.currentTarget as HTMLTextAreaElement).value)}
      />
      {props.hint && (
        <small id={`${id}-hint`} class="hint">
          {props.hint}
        </small>
      )}
    </div>
  );
}

export function Select(props: { label: string; value: string; options: Array<[string, string]>; onChange: (value: string) => void }) {
  const [id] = useState(() => newId('select'));
  return (
    <div class="field">
      <label for={id}>
        <LabelText text={props.label} />
      </label>
      <select id={id} value={props.value} onChange={(event) => props.onChange((event.currentTarget as HTMLSelectElement).value)}>
        {props.options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

export function Checkbox(props: { label: string; checked: boolean; onChange: (checked: boolean) => void }) {
  const [id] = useState(() => newId('check'));
  return (
    <div class="field checkbox">
      <input id={id} type="checkbox" checked={props.checked} onChange={(event) => props.onChange((event.currentTarget as HTMLInputElement).checked)} />
      <label for={id}>
        <LabelText text={props.label} />
      </label>
    </div>
  );
}

/** The fields of a quota form (setKeyQuota, setProjectQuota): new credits, new period, and whether the period's usage restarts. */
export function QuotaFields(props: {
  credits: string;
  period: string;
  reset: boolean;
  onCredits: (value: string) => void;
  onPeriod: (value: string) => void;
  onReset: (reset: boolean) => void;
}) {
  return (
    <div class="grid">
      <Field label="New credits per period" type="number" min={0} value={props.credits} onInput={props.onCredits} required />
      <Field label="New period (days)" type="number" min={1} value={props.period} onInput={props.onPeriod} required />
      <Checkbox label="Reset this period's usage" checked={props.reset} onChange={props.onReset} />
    </div>
  );
}

export function ErrorNote({ message }: { message: string | undefined }) {
  if (!message) return null;
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/**
 * A create or edit form in a panel, named by its heading. Submitting runs `action`; its failure is
 * shown above the submit button, which stays disabled while it runs (or while `incomplete`). A create
 * form has Cancel too.
 */
export function PanelForm(props: {
  title: string;
  submit: string;
  action: () => Promise<void>;
  onCancel?: () => void;
  incomplete?: boolean;
  children: ComponentChildren;
}) {
  const [error, run, busy] = useAction();
  return (
    <form
      class="panel"
      aria-label={props.title}
      onSubmit={(event) => {
        event.preventDefault();
        void run(props.action);
      }}
    >
      <h2>{props.title}</h2>
      <FormName.Provider value={props.title}>{props.children}</FormName.Provider>
      <ErrorNote message={error} />
      <div class="actions">
        <button type="submit" disabled={busy || props.incomplete === true}>
          {props.submit}
        </button>
        {props.onCancel && (
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

/** A button that opens a create form in its place; the form gets `close` for when it is done or canceled. */
export function Opener(props: { label: string; allowed: boolean; children: (close: () => void) => ComponentChildren }) {
  const [open, setOpen] = useState(false);
  if (open) return <>{props.children(() => setOpen(false))}</>;
  if (!props.allowed) return null;
  return (
    <button type="button" onClick={() => setOpen(true)}>
      {props.label}
    </button>
  );
}

/** A list page's filter bar: its fields, the submit button that applies them, then any further buttons. */
export function FilterBar(props: { label: string; submit: string; busy?: boolean; onApply: () => void; children: ComponentChildren; after?: ComponentChildren }) {
  return (
    <form
      class="filters"
      aria-label={props.label}
      onSubmit={(event) => {
        event.preventDefault();
        props.onApply();
      }}
    >
      <FormName.Provider value={props.label}>{props.children}</FormName.Provider>
      <button type="submit" disabled={props.busy}>
        {props.submit}
      </button>
      {props.after}
    </form>
  );
}

/**
 * A table of `rows`, one row each from `children`, named by its (visually hidden) caption. Columns
 * given as `false` are left out (those a scope does not open). `empty` is said once the rows are in
 * and there are none; while `loading` and no rows are in yet, that they are on their way.
 */
export function Table<T>(props: {
  caption: string;
  columns: Array<string | false>;
  rows: readonly T[] | undefined;
  empty?: string;
  loading?: boolean;
  children: (row: T) => ComponentChildren;
}) {
  const waiting = props.loading === true && props.rows === undefined;
  return (
    <>
      <table aria-busy={props.loading === true}>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map(
              (column) =>
                column !== false && (
                  <th key={column} scope="col">
                    {column}
                  </th>
                ),
            )}
          </tr>
        </thead>
        <tbody>{props.rows?.map(props.children)}</tbody>
      </table>
      {waiting && <p role="status">Loading {props.caption.toLowerCase()}…</p>}
      {props.empty !== undefined && props.rows?.length === 0 && <p>{props.empty}</p>}
    </>
  );
}

/** The button to the page after this one, shown only while there is one (`next`: its cursor). */
export function NextPage(props: { label: string; next: string | null | undefined; busy?: boolean; onNext: (cursor: string) => void }) {
  const { next } = props;
  if (!next) return null;
  return (
    <button type="button" class="secondary" disabled={props.busy} onClick={() => props.onNext(next)}>
      {props.label}
    </button>
  );
}

/** Enable / Disable for a row that can be switched off: Disable (a danger button) while it is on. */
export function EnableToggle(props: { enabled: boolean; of: string; onChange: (enabled: boolean) => void }) {
  return props.enabled ? <RowButton label="Disable" of={props.of} danger onClick={() => props.onChange(false)} /> : <RowButton label="Enable" of={props.of} onClick={() => props.onChange(true)} />;
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

/** A secret shown once (a new key, a webhook signing secret) with a button that copies it. */
export function OnceSecret(props: { label: string; value: string; onDismiss: () => void }) {
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied('Copied.');
    } catch {
      setCopied('Copying was refused by the browser: select the text and copy it.');
    }
  };
  return (
    <section class="secret">
      <h3>{props.label}</h3>
      <p>Shown only this once: store it now.</p>
      <output aria-label={props.label} class="secret-value">
        {props.value}
      </output>
      <div class="actions">
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={props.onDismiss}>
          Done
        </button>
      </div>
      <span role="status">{copied}</span>
    </section>
  );
}

/** Loads data for a page; `reload` fetches again after a change. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: string | undefined; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false }),
      (error: unknown) => current && setState({ error: error instanceof Error ? error.message : String(error), loading: false }),
    );
    return () => {
      current = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

/** A form's values as typed, and `set(field)`, the input handler that changes one of them. */
export function useForm<T extends object>(initial: T | (() => T)): [T, <K extends keyof T>(field: K) => (value: T[K]) => void, (form: T) => void] {
  const [form, setForm] = useState<T>(initial);
  const set = useCallback(<K extends keyof T>(field: K) => (value: T[K]) => setForm((previous) => ({ ...previous, [field]: value })), []);
  return [form, set, setForm];
}

/** Runs an action, keeping its error message (or undefined) for an ErrorNote. */
export function useAction(): [string | undefined, (action: () => Promise<void>) => Promise<void>, boolean] {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (action: () => Promise<void>) => {
    setError(undefined);
    setBusy(true);
    try {
      await action();
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    } finally {
      setBusy(false);
    }
  }, []);
  return [error, run, busy];
}

export const formatTime = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/** "a, b, c" into a list (empty entries dropped). */
export const listOf = (text: string) =>
  text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
