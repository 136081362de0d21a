/**
 * Imported first by the API and the worker (before anything loads `pg`), so that the Postgres
 * instrumentation can patch it when tracing is configured.
 */
import { instrumentLibraries } from './tracing';

instrumentLibraries();
