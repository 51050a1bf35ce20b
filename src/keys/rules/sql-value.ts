import type { Expression } from 'kysely';

/** An operand of a rule's SQL form: a column or other expression, or a value bound as a parameter. */
export type SqlValue<T> = Expression<T> | T;
