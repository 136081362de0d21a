import { createInvite } from '../../console/accounts';
import { consoleRoles } from '../../console/roles';
import { OpsError } from '../../ops/errors';
import type { CommandTable } from '../command';

/** `console-user …` */
export const consoleUserCommands: CommandTable = {
  /** A one-time link for a console user of one seller or one merchant (a tenant's first owner). */
  'console-user invite': {
    flags: { seller: 'value', merchant: 'value', email: 'value', role: 'value' },
    run: async (f, { db, settings }) => {
      const seller = f.optional('seller');
      const merchant = f.optional('merchant');
      if ((seller === undefined) === (merchant === undefined))
        throw new OpsError('invalid_tenant', 'give exactly one of --seller and --merchant');
      const tenant = seller !== undefined ? { sellerId: seller } : { merchantId: merchant! };
      const invite = await createInvite(db, {
        ...tenant,
        email: f.required('email'),
        role: f.oneOf('role', consoleRoles),
        now: new Date(),
      });
      const base = settings.PUBLIC_BASE_URL.replace(/\/+$/, '');
      return {
        invite_id: invite.invite_id,
        email: f.required('email').trim(),
        role: f.required('role'),
        ...(seller !== undefined ? { seller_id: seller } : { merchant_id: merchant }),
        expires_at: invite.expires_at,
        link: `${base}/console/invite/${invite.token}`,
      };
    },
  },
};
