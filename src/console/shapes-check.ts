// Type-only: fails `tsc` when a route's schema stops giving what the console's mirror of it reads.
import type { z } from 'zod';
import type { endpointListView, endpointView } from '../events/endpoints/schemas.js';
import type { eventView, feedView, queuedView } from '../events/schemas.js';
import type { statsView, strayPageView } from '../stats/schemas.js';
import type { campaignPage, campaignView, cancelAnswer } from '../campaigns/schemas.js';
import type * as Page from './ui/shapes.js';

type Gives<Server extends Read, Read> = Server;

export type StatsChecked = Gives<z.infer<typeof statsView>, Page.Stats>;
export type EventChecked = Gives<z.infer<typeof eventView>, Page.EventView>;
export type FeedChecked = Gives<z.infer<typeof feedView>, Page.EventPage>;
export type CallbacksChecked = Gives<z.infer<typeof strayPageView>, Page.CallbackPage>;
export type QueuedChecked = Gives<z.infer<typeof queuedView>, { queued: number }>;
export type EndpointChecked = Gives<z.infer<typeof endpointView>, Page.EndpointView>;
export type EndpointListChecked = Gives<z.infer<typeof endpointListView>, Page.EndpointList>;
export type CampaignChecked = Gives<z.infer<typeof campaignView>, Page.CampaignView>;
export type CampaignPageChecked = Gives<z.infer<typeof campaignPage>, Page.CampaignPage>;
export type CampaignCancelChecked = Gives<z.infer<typeof cancelAnswer>, Page.CampaignCancelled>;
