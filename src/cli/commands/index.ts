import type { CommandTable } from '../command';
import { campaignCommands } from './campaign';
import { categoryCommands } from './category';
import { checkoutKeyCommands } from './checkout-key';
import { consoleUserCommands } from './console-user';
import { demoCommands } from './demo';
import { fxCommands } from './fx';
import { ledgerCommands } from './ledger';
import { merchantCommands } from './merchant';
import { methodCommands } from './method';
import { orderCommands } from './order';
import { outboxCommands } from './outbox';
import { partnerKeyCommands } from './partner-key';
import { releaseCommands } from './release';
import { productCommands } from './product';
import { sellerCommands } from './seller';
import { statusCommands } from './status';
import { stockCommands } from './stock';
import { webhookEndpointCommands } from './webhook-endpoint';
import { workflowCommands } from './workflow';

/** Every operator command, keyed by its words (`seller create`, `demo`). */
export const commands: CommandTable = {
  ...sellerCommands,
  ...partnerKeyCommands,
  ...categoryCommands,
  ...productCommands,
  ...stockCommands,
  ...campaignCommands,
  ...orderCommands,
  ...ledgerCommands,
  ...merchantCommands,
  ...checkoutKeyCommands,
  ...methodCommands,
  ...fxCommands,
  ...outboxCommands,
  ...webhookEndpointCommands,
  ...consoleUserCommands,
  ...demoCommands,
  ...workflowCommands,
  ...statusCommands,
  ...releaseCommands,
};
