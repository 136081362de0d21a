import { setMerchantMethod } from '../../ops/merchant-methods';
import type { Command, CommandTable } from '../command';

/** `method enable` or `method disable`. */
function toggle(enabled: boolean): Command {
  return {
    flags: { merchant: 'value', mode: 'value', code: 'value' },
    run: (f, { db }) =>
      setMerchantMethod(db, {
        merchantId: f.required('merchant'),
        mode: f.oneOf('mode', ['test', 'live']),
        code: f.required('code'),
        enabled,
      }),
  };
}

/** `method …`: a merchant's payment methods per mode. */
export const methodCommands: CommandTable = {
  'method enable': toggle(true),
  'method disable': toggle(false),
};
