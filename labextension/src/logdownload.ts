/**
 * What the log view's Download saves: the whole log of the shown replica as the view shows
 * it, so with each line's time when the times are shown (read with `timestamps=1`; the
 * page keeps only the log's tail, so the whole log is read again), under a file name that
 * says so.
 */
import { KubelabApi, LogReplica } from './api';

export interface ILogFile {
  /** `<name>-<id>-replica<N>.log` (`-build.log` for the build's), or `…-timestamps.log` when each
   * line starts with its time. */
  filename: string;
  text: string;
}

/** The whole log of `replica`, read once (not followed), as a file to save. */
export async function logFile(
  api: KubelabApi,
  run: { name: string; id: string },
  replica: LogReplica,
  timestamps: boolean
): Promise<ILogFile> {
  let text = '';
  await api.logs(
    run.id,
    replica,
    false,
    chunk => (text += chunk),
    undefined,
    timestamps
  );
  const timed = timestamps ? '-timestamps' : '';
  return {
    filename: `${run.name}-${run.id}-${replica === 'build' ? 'build' : `replica${replica}`}${timed}.log`,
    text
  };
}
