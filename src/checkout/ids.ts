/** What an object id can look like (`cs_test_…`, `evt_…`); anything else names no object, so it is a 404. */
export const isObjectId = (id: string): boolean => /^[A-Za-z0-9_]{1,100}$/.test(id);
