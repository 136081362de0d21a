/** A test-mode session of 45,000 IQD paid by the test method, no phone needed: one shopper's journey. */
export const journeySessionBody = (reference: string) => ({
  reference_id: reference,
  amount: 45000,
  currency: 'IQD',
  line_items: [
    { label: 'Shirt', amount: 21000, quantity: 2, type: 'charge' },
    { label: 'Delivery', amount: 3000, type: 'shipping' },
  ],
  payment_method_types: ['test'],
  collect: { phone: 'none', name: 'optional', shipping_address: 'none' },
  success_url: 'https://shop.example.com/done',
});
