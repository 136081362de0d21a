/** Every workflow the worker runs; this file is the bundle's entry point. */
export { deliveryWorkflow } from './delivery';
export { endpointDeliveryWorkflow } from './delivery-endpoint';
export { janitorWorkflow } from './janitor';
export { refundWorkflow } from './refund';
export { sessionWorkflow } from './session';
