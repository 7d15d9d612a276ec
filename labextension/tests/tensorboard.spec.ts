import { ITensorBoardSession, sessionEnded } from '../src/api';

const session = (id: string, state: string): ITensorBoardSession => ({
  id,
  url: `/kubelab/tensorboard/${id}/`,
  logdirs: { run: `/runs/${id}/tensorboard` },
  state
});

describe('sessionEnded', () => {
  const sessions = [
    session('a', 'running'),
    session('b', 'stopped'),
    session('c', 'failed'),
    session('d', 'starting')
  ];

  it('says a stopped or failed session has ended, so its tab closes', () => {
    expect(sessionEnded(sessions, 'b')).toBe(true);
    expect(sessionEnded(sessions, 'c')).toBe(true);
  });

  it('keeps running, starting and not yet listed sessions open', () => {
    expect(sessionEnded(sessions, 'a')).toBe(false);
    expect(sessionEnded(sessions, 'd')).toBe(false);
    expect(sessionEnded(sessions, 'new')).toBe(false);
  });
});
