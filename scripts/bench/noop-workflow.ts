/** The benchmark floor's workflow: it does nothing, so starting it measures Temporal alone. */
export async function benchNoopWorkflow(): Promise<void> {
  // Deliberately empty.
}
