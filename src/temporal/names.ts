/** The task queue shared by the API, the worker and the tests (TEMPORAL_TASK_QUEUE overrides it). */
export const defaultTaskQueue = 'svc-main';
